package proxy

import (
	"os"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// TestMain stops the throwaway PostgreSQL the review benchmarks start on
// first use (none when no test or benchmark asks for one).
func TestMain(m *testing.M) { os.Exit(testkit.PostgresMain(m)) }
