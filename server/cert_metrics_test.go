package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
)

// kobe_instance_cert_expiry_seconds comes from the store's rows, one series per kind.
func TestCertificateExpiryGauge(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.UpsertInstance(ctx, store.Instance{ID: "dev-1", Pool: "dev", Backend: "local", Phase: api.InstanceReady}))
	at := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, st.PutInstanceCertificates(ctx, store.InstanceCertificates{InstanceID: "dev-1", Pool: "dev",
		CA: at.Add(time.Hour), Serving: at, Client: at.Add(time.Minute)}))
	got := scrape(t, prometheusRegistry(&server.CertificateCollector{Store: st}))
	assert.Equal(t, float64(at.Unix()), got[`kobe_instance_cert_expiry_seconds{instance="dev-1",kind="serving",pool="dev"}`], "%v", got)
	assert.Equal(t, float64(at.Add(time.Hour).Unix()), got[`kobe_instance_cert_expiry_seconds{instance="dev-1",kind="ca",pool="dev"}`])
	assert.Equal(t, float64(at.Add(time.Minute).Unix()), got[`kobe_instance_cert_expiry_seconds{instance="dev-1",kind="client",pool="dev"}`])
}
