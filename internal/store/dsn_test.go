package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDSN(t *testing.T) {
	d, err := ParseDSN("sqlite:///var/lib/kobe/kobe.db")
	require.NoError(t, err)
	assert.Equal(t, DSN{Driver: "sqlite", Path: "/var/lib/kobe/kobe.db"}, d)
	d, err = ParseDSN("postgresql://kobe:pw@db:5432/kobe?sslmode=disable")
	require.NoError(t, err)
	assert.Equal(t, "postgres", d.Driver)
	for _, bad := range []string{"", "sqlite://", "sqlite:///x?mode=ro", "redis://x", "postgres://"} {
		_, err := ParseDSN(bad)
		assert.Error(t, err, bad)
	}
}

func TestRedactDSN(t *testing.T) {
	assert.Equal(t, "postgres://kobe:xxxxx@db:5432/kobe", RedactDSN("postgres://kobe:hunter2@db:5432/kobe"))
	assert.Equal(t, "postgres://kobe@db/kobe", RedactDSN("postgres://kobe@db/kobe"))
	_, err := ParseDSN("postgres://kobe:p%zz@db/kobe")
	require.Error(t, err)
	assert.False(t, strings.Contains(err.Error(), "p%zz"), err.Error())
}
