package secrets

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

func TestInit(t *testing.T) {
	t.Setenv("KOBE_SECRET_KEY_FILE", "")
	ios, _, out, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	err := cmdtest.Run(NewCmdInit(f, nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--secret-key-file is required (env KOBE_SECRET_KEY_FILE)")

	path := filepath.Join(t.TempDir(), "secret.key")
	require.NoError(t, cmdtest.Run(NewCmdInit(f, nil), "--secret-key-file", path))
	first, err := secretbox.LoadKeyFile(path)
	require.NoError(t, err)
	assert.Equal(t, "created "+path+" with key "+first.Fingerprint()+": give the same file to the server and every worker\n", out.String())

	out.Reset()
	t.Setenv("KOBE_SECRET_KEY_FILE", path)
	require.NoError(t, cmdtest.Run(NewCmdInit(f, nil)), "run again (a Job at every install): kept")
	assert.Equal(t, path+" exists (sealing key "+first.Fingerprint()+"): kept as it is\n", out.String())
	again, err := secretbox.LoadKeyFile(path)
	require.NoError(t, err)
	assert.Equal(t, first.Fingerprints(), again.Fingerprints())

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdInit(f, nil), "--add-key"))
	ring, err := secretbox.LoadKeyFile(path)
	require.NoError(t, err)
	assert.Equal(t, first.Fingerprint(), ring.Fingerprints()[0])
	assert.Equal(t, "added key "+ring.Fingerprint()+" to "+path+": it seals from now on; the file holds 2 keys\n", out.String())
}

// kobe secrets rotate on a real store of each driver holding a lease credential sealed by
// kobe v0.1.0 (no key id), one sealed with the old key and a prepared credential: every value
// is re-sealed with the new key and still opens; a second run has nothing to do; the old key
// can then go; a key file without the store's key is refused.
func TestRotateOnRealStores(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "secretbox", "testdata", "sealed-v0.1.0.json"))
	require.NoError(t, err)
	var vector struct{ KeyFile, AAD, Plaintext, Sealed string }
	require.NoError(t, json.Unmarshal(raw, &vector))
	v010Sealed, err := base64.StdEncoding.DecodeString(vector.Sealed)
	require.NoError(t, err)
	v010Lease := vector.AAD // a lease's kubeconfig is bound to its lease id

	for name, newDSN := range dbtest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := newDSN(t)
			keyFile := filepath.Join(t.TempDir(), "secret.key")
			require.NoError(t, os.WriteFile(keyFile, []byte(vector.KeyFile), 0o600))
			old, err := secretbox.LoadKeyFile(keyFile)
			require.NoError(t, err)

			st, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			defer st.Close()
			for _, id := range []string{v010Lease, "lease-2"} {
				require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: id, Pool: "ci", Principal: "alice", Phase: api.LeasePending, TTL: time.Hour}))
			}
			require.NoError(t, st.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: v010Lease, Sealed: v010Sealed, ExpiresAt: time.Now().Add(time.Hour)}))
			require.NoError(t, leasecred.Put(ctx, st, old, "lease-2", testCredential("kubeconfig of lease-2")))
			require.NoError(t, st.UpsertInstance(ctx, store.Instance{ID: "ci-1", Pool: "ci", Backend: "local", Phase: api.InstanceReady}))
			sealedPrepared, err := leasecred.SealPrepared(old, "ci-1", testPrepared())
			require.NoError(t, err)
			require.NoError(t, st.PutPreparedCredential(ctx, "ci-1", sealedPrepared))
			_, err = st.RecordSealingKey(ctx, "", old.Fingerprint())
			require.NoError(t, err)

			// A key file without the store's key is refused, changing nothing.
			ios, _, out, _ := iostreams.Test()
			f := &factory.Factory{IOStreams: ios}
			stranger := filepath.Join(t.TempDir(), "other.key")
			_, err = secretbox.CreateKeyFile(stranger)
			require.NoError(t, err)
			err = cmdtest.Run(NewCmdRotate(f, nil), "--store", dsn, "--secret-key-file", stranger)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "does not hold the store's sealing key "+old.Fingerprint())

			ring, err := secretbox.AddKey(keyFile)
			require.NoError(t, err)
			require.NoError(t, cmdtest.Run(NewCmdRotate(f, nil), "--store", dsn, "--secret-key-file", keyFile))
			assert.Equal(t, "re-sealed 3 values with key "+ring.Fingerprint()+" (0 already were, 0 changed meanwhile)\n", out.String())
			recorded, err := st.SealingKey(ctx)
			require.NoError(t, err)
			assert.Equal(t, ring.Fingerprint(), recorded)

			out.Reset()
			require.NoError(t, cmdtest.Run(NewCmdRotate(f, nil), "--store", dsn, "--secret-key-file", keyFile, "-o", "json"))
			var view RotateView
			require.NoError(t, json.Unmarshal(out.Bytes(), &view))
			assert.Equal(t, RotateView{Key: ring.Fingerprint(), Current: 3}, view, "run again: nothing left to do")

			// The old key can go: the new one alone opens everything.
			newOnly := filepath.Join(t.TempDir(), "new.key")
			lines := readLines(t, keyFile)
			require.NoError(t, os.WriteFile(newOnly, []byte(lines[len(lines)-1]+"\n"), 0o600))
			fresh, err := secretbox.LoadKeyFile(newOnly)
			require.NoError(t, err)
			values, err := st.SealedValues(ctx)
			require.NoError(t, err)
			require.Len(t, values, 3)
			for _, v := range values {
				assert.Equal(t, fresh.Fingerprint(), secretbox.SealedBy(v.Sealed), v.ID)
			}
			kc, err := leasecred.Kubeconfig(ctx, st, fresh, v010Lease)
			require.NoError(t, err)
			assert.Equal(t, vector.Plaintext, string(kc), "the v0.1.0 value, re-sealed")
			kc, err = leasecred.Kubeconfig(ctx, st, fresh, "lease-2")
			require.NoError(t, err)
			assert.Equal(t, "kubeconfig of lease-2", string(kc))
			p, err := leasecred.Prepared(ctx, st, fresh, "ci-1")
			require.NoError(t, err)
			assert.Equal(t, testPrepared(), p)
		})
	}
}

func readLines(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func testCredential(kubeconfig string) backends.Credential {
	return backends.Credential{Kubeconfig: []byte(kubeconfig), User: "lease", ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Second), ID: "c1"}
}

func testPrepared() backends.PreparedCredential {
	return backends.PreparedCredential{Cluster: "ci-1", Server: "https://127.0.0.1:6443", ServerCAPEM: []byte("ca"),
		User: "holder", Token: "token", ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
}
