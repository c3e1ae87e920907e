// Command coredns is CoreDNS with only the plugins a Kubernetes cluster's DNS uses (the
// host cluster's Corefile in testsuite/hostcluster, and kubeadm's default one). The upstream
// main compiles in every plugin of plugin.cfg, and the cloud ones (route53, azure, clouddns)
// bring their SDKs: on a cold 2-core machine that build took 7 minutes of `make tools`.
//
// Built by hack/build-node-tools.sh; the CoreDNS version is pinned in this folder's go.mod.
package main

import (
	"fmt"
	"os"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the plugins above in plugin.cfg's order, which is the order a query passes
// through them (the metrics plugin's directive is "prometheus").
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log",
	"loadbalance", "cache", "kubernetes", "loop", "forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		fmt.Fprintln(os.Stderr, "coredns:", err)
		os.Exit(1)
	}
	coremain.Run()
}
