package credentials

import (
	"crypto/rand"
	"fmt"
	"io"
)

const (
	alphanumeric = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	hexDigits    = "0123456789abcdef"
	base64URL    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)

func alphabet(name string) (string, error) {
	switch name {
	case AlphabetAlphanumeric:
		return alphanumeric, nil
	case AlphabetHex:
		return hexDigits, nil
	case AlphabetBase64URL:
		return base64URL, nil
	}
	return "", errUnknownAlphabet
}

// GenerateValue returns a value of g.Length characters drawn uniformly from g's
// alphabet with crypto/rand.
func GenerateValue(g Generate) ([]byte, error) { return generate(rand.Reader, g) }

// generate draws from r by rejection sampling: a random byte b is used only
// when b < 256 - 256%n, so b%n is uniform over the n characters (no modulo
// bias); other bytes are thrown away.
func generate(r io.Reader, g Generate) ([]byte, error) {
	chars, err := alphabet(g.Alphabet)
	if err != nil {
		return nil, err
	}
	if g.Length < MinLength || g.Length > MaxLength {
		return nil, fmt.Errorf("length %d outside %d..%d", g.Length, MinLength, MaxLength)
	}
	n := len(chars)
	limit := 256 - 256%n
	out := make([]byte, 0, g.Length)
	buf := make([]byte, g.Length+g.Length/2)
	for len(out) < g.Length {
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("reading randomness: %w", err)
		}
		for _, b := range buf {
			if int(b) < limit {
				out = append(out, chars[int(b)%n])
				if len(out) == g.Length {
					break
				}
			}
		}
	}
	clear(buf)
	return out, nil
}
