package datastore

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNameForIsSafeInjectiveAndWithinLimits(t *testing.T) {
	n, err := NameFor("dev-12", postgresNameLimit)
	require.NoError(t, err)
	assert.Equal(t, "kobe_dev_12", n)

	long := strings.Repeat("a", 40) + "-" + strings.Repeat("b", 22) // 63 characters
	for _, limit := range []int{postgresNameLimit, mysqlNameLimit} {
		n, err := NameFor(long, limit)
		require.NoError(t, err)
		assert.Len(t, n, limit)
		assert.Regexp(t, `^kobe_a+(_b+)?_[0-9a-f]{10}$`, n)
		other, err := NameFor(long[:62]+"c", limit)
		require.NoError(t, err)
		assert.NotEqual(t, n, other, "ids that differ only past the cut differ by their hash")
		require.NoError(t, checkName(n))
	}
	for _, bad := range []string{"", "Dev", "a_b", "a;drop", "-a", "a-", `a"b`, "a b", strings.Repeat("a", 64)} {
		_, err := NameFor(bad, postgresNameLimit)
		assert.Error(t, err, "%q", bad)
	}
}

func TestDSNNeverShowsItsPassword(t *testing.T) {
	for _, raw := range []string{
		"postgres://kobe_x:s3cret@127.0.0.1:5432/kobe_x?sslmode=disable",
		"mysql://kobe_x:s3cret@tcp(127.0.0.1:3306)/kobe_x",
		"nats://s3cret@127.0.0.1:4222?bucket=kobe_x",
		"nats://user:s3cret@127.0.0.1:4222?bucket=kobe_x",
	} {
		d := NewDSN(raw)
		js, err := json.Marshal(struct{ DSN DSN }{d})
		require.NoError(t, err)
		var logged strings.Builder
		slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "dsn", d)
		for _, shown := range []string{d.String(), fmt.Sprintf("%v %+v %#v %s", d, d, d, d), fmt.Sprintf("%+v", struct{ D DSN }{d}), string(js), logged.String()} {
			assert.NotContains(t, shown, "s3cret", raw)
			assert.Contains(t, shown, "127.0.0.1", "the rest stays readable")
		}
		assert.Equal(t, raw, d.Reveal())
	}
}

func TestParseRefusesWhatItCannotProvision(t *testing.T) {
	cases := map[string]string{
		"nope":                                       "unsupported datastore scheme",
		"redis://127.0.0.1:6379":                     `unsupported datastore scheme "redis"`,
		"mariadb://root@127.0.0.1:3306/":             "MariaDB is reached with mysql://",
		"sqlite:///tmp/x.db":                         `unsupported datastore scheme "sqlite"`,
		"postgres:///postgres":                       "missing host",
		"postgres://127.0.0.1/postgres":              "missing user",
		"mysql://root:pw@unix(/run/mysqld.sock)/":    "only tcp(host:port)",
		"nats://a:4222,nats://b:4222":                "comma-separated",
		"nats://127.0.0.1:4222?bucket=mine":          `query parameter "bucket" is not supported`,
		"nats://127.0.0.1:4222/x":                    "a NATS URL has none",
		"postgres://u:hunter2@%zz/postgres":          "not a valid URL",
		"mysql://u:hunter2@tcp(127.0.0.1:3306)/?x=%": "",
	}
	for in, want := range cases {
		_, err := Parse(in)
		if want == "" {
			if err != nil {
				assert.NotContains(t, err.Error(), "hunter2")
			}
			continue
		}
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
		assert.NotContains(t, err.Error(), "hunter2", "errors never quote the password")
	}
	s, err := Parse("mysql://root:pw@127.0.0.1:3306/")
	require.NoError(t, err, "the URL form of MySQL is accepted too")
	assert.Equal(t, MySQL, s.Driver())
	assert.NotContains(t, s.String(), "pw@")
}

func TestScrubRemovesTheDSNsPasswordFromText(t *testing.T) {
	d := NewDSN("postgres://kobe_x:0123abcd@127.0.0.1:5432/kobe_x")
	assert.Equal(t, "kine: login kobe_x/xxxxx failed", d.Scrub("kine: login kobe_x/0123abcd failed"))
	assert.Equal(t, "nothing secret", d.Scrub("nothing secret"))
}
