package devserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/server_options"
)

// UI is the Temporal Web UI served from the assets inside the ui-server module (no network needed).
type UI struct {
	server *uiserver.Server
	url    string
	done   chan struct{}
}

type staticUIConfig struct{ cfg *uiconfig.Config }

func (s staticUIConfig) GetConfig() (*uiconfig.Config, error) { return s.cfg, nil }

// StartUI serves the Web UI on ip:port, talking to the Temporal frontend at temporalAddr.
func StartUI(ip string, port int, temporalAddr, namespace string) (*UI, error) {
	// The ui-server exits the whole process (log.Fatal) when it cannot bind, so check first.
	if err := CheckPortFree(ip, port); err != nil {
		return nil, fmt.Errorf("ui port: %w", err)
	}
	cfg := &uiconfig.Config{
		Host:                ip,
		Port:                port,
		TemporalGRPCAddress: temporalAddr,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		// Offline machines cannot fetch the news feed; without this the UI waits on it.
		DisableNewsFetch: true,
		HideLogs:         true,
		CORS:             uiconfig.CORS{CookieInsecure: true},
	}
	srv := uiserver.NewServer(server_options.WithConfigProvider(staticUIConfig{cfg}))
	ui := &UI{server: srv, url: "http://" + net.JoinHostPort(ip, strconv.Itoa(port)), done: make(chan struct{})}
	go func() {
		defer close(ui.done)
		_ = srv.Start()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		resp, err := http.Get(ui.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			return ui, nil
		}
		select {
		case <-ctx.Done():
			srv.Stop()
			return nil, fmt.Errorf("temporal ui did not start on %s: %v", ui.url, err)
		case <-time.After(30 * time.Millisecond):
		}
	}
}

// URL is the UI's base URL.
func (u *UI) URL() string { return u.url }

// Stop stops the UI server.
func (u *UI) Stop() {
	u.server.Stop()
	<-u.done
}
