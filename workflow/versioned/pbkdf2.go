package versioned

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"hash"
)

// sha256Magic opens crypto/sha256's saved state; the chaining value
// follows, big-endian.
const sha256Magic = "sha\x03"

// sha256State is what sha256.New's hash offers to save and restore its
// chaining state (encoding.BinaryAppender and BinaryUnmarshaler).
type sha256State interface {
	hash.Hash
	encoding.BinaryAppender
	encoding.BinaryUnmarshaler
}

// pbkdf2SHA256 is pbkdf2.Key(sha256.New, password, salt, iter, 32): one
// 32-byte block of PBKDF2-HMAC-SHA256, the same bytes, with less work per
// iteration. Every iteration after the first is HMAC-SHA256 of the 32-byte
// U of the one before: an inner and an outer SHA-256 of 96 bytes each (a
// 64-byte pad block already compressed, then one block holding U, its
// padding and its length), so each is one compression from the saved state
// of its pad block, fed as one whole block: no buffering, no padding
// computed per call, no Sum. (HMAC's own precomputation of the pad states:
// FIPS 198-1, section 6.) crypto/pbkdf2 computes the same when the hash
// cannot save its state.
func pbkdf2SHA256(password string, salt []byte, iter int) ([]byte, error) {
	inner, ok1 := sha256.New().(sha256State)
	outer, ok2 := sha256.New().(sha256State)
	if !ok1 || !ok2 || iter < 1 {
		return pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size)
	}
	key := []byte(password)
	if len(key) > sha256.BlockSize {
		sum := sha256.Sum256(key)
		key = sum[:]
	}
	var ipad, opad [sha256.BlockSize]byte
	copy(ipad[:], key)
	copy(opad[:], key)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	inner.Write(ipad[:])
	outer.Write(opad[:])
	innerPad, err := inner.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	outerPad, err := outer.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	if len(innerPad) < 4+sha256.Size || string(innerPad[:4]) != sha256Magic {
		return pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size) // a state this code does not read
	}

	// U1 = HMAC(password, salt || INT(1)).
	inner.Write(salt)
	inner.Write([]byte{0, 0, 0, 1})
	u := inner.Sum(nil)
	outer.Write(u)
	u = outer.Sum(u[:0])
	t := make([]byte, sha256.Size)
	copy(t, u)

	// Un = HMAC(password, Un-1): the block after a pad block holds the
	// 32-byte message, 0x80, zeros and the length of the 96 bytes in bits.
	var block [sha256.BlockSize]byte
	block[sha256.Size] = 0x80
	binary.BigEndian.PutUint64(block[sha256.BlockSize-8:], (sha256.BlockSize+sha256.Size)*8)
	state := make([]byte, 0, len(innerPad))
	h := inner
	for n := 2; n <= iter; n++ {
		copy(block[:sha256.Size], u)
		for _, pad := range [2][]byte{innerPad, outerPad} {
			if err := h.UnmarshalBinary(pad); err != nil {
				return nil, err
			}
			h.Write(block[:])
			if state, err = h.AppendBinary(state[:0]); err != nil {
				return nil, err
			}
			// The state is a 4-byte magic, then the chaining value: after
			// a whole block, that is the digest.
			copy(block[:sha256.Size], state[4:4+sha256.Size])
		}
		u = block[:sha256.Size]
		for i := range t {
			t[i] ^= u[i]
		}
	}
	return t, nil
}
