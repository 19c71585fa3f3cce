package deps
import (
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	_ "k8s.io/client-go/kubernetes"
	_ "github.com/looplab/fsm"
	_ "github.com/testcontainers/testcontainers-go"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
)
