package soak

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
)

// needle is a secret value and what it is.
type needle struct {
	what  string
	value string
	// canary marks a value that is not secret and must be found: a principal's name, which
	// every lease workflow's input carries. A scan that cannot find it could not find a secret.
	canary bool
}

// secretNeedles lists what must never appear in a log or a workflow history: every bearer token
// the soak used, the store password, the key that seals kubeconfigs, the client keys of every
// kubeconfig a lease got, and the markers of private keys and kubeconfig credentials.
func (e *env) secretNeedles(tr *traffic, sealingKey string) []needle {
	ns := []needle{
		{what: "the admin bearer token", value: e.adminToken},
		{what: "the store password (datastore DSN)", value: e.dbPass},
		{what: "the kubeconfig sealing key", value: sealingKey},
		{what: "a private key (PEM marker)", value: "PRIVATE KEY-----"},
		{what: "kubeconfig client key data", value: "client-key-data"},
	}
	for _, p := range e.principals {
		ns = append(ns, needle{what: "the bearer token of " + p.name, value: p.token})
	}
	ns = append(ns, needle{what: "the canary (principal name " + e.principals[0].name + ")", value: e.principals[0].name, canary: true})
	for _, l := range tr.leases {
		for _, s := range l.secrets {
			// The PEM's longest body line: matches the PEM itself and a JSON-escaped PEM.
			if line := longestLine(s); len(line) >= 32 {
				ns = append(ns, needle{what: "the client key of lease " + l.ID, value: line})
			}
			// As it sits in a kubeconfig (client-key-data: base64 of the PEM).
			ns = append(ns, needle{what: "the client key data of lease " + l.ID, value: base64.StdEncoding.EncodeToString([]byte(s))[:64]})
		}
	}
	return ns
}

func longestLine(s string) string {
	var best string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "-----") && len(line) > len(best) {
			best = line
		}
	}
	return best
}

// forms are the ways a secret can sit in bytes: as is, and base64-encoded inside a larger value
// (JSON encodes []byte as base64) at each of the three alignments.
func forms(v string) []string {
	out := []string{v}
	for off := 0; off < 3; off++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, off), v...))
		// Drop the groups that mix in the unknown neighbours: the first one when shifted, and the
		// last one (it may hold padding or the next bytes).
		from := 0
		if off > 0 {
			from = 4
		}
		if len(enc)-4 > from+8 {
			out = append(out, enc[from:len(enc)-4])
		}
	}
	return out
}

type secretsSummary struct {
	LogFiles  int      `json:"logFiles"`
	LogBytes  int      `json:"logBytes"`
	Workflows int      `json:"workflows"`
	Events    int      `json:"events"`
	Needles   int      `json:"needles"`
	Findings  []string `json:"findings,omitempty"`
	// CanaryFound counts the histories holding the canary (must be > 0: the scan works).
	CanaryFound int `json:"canaryFound"`
}

// scanSecrets looks for every needle, in every form, in the log files and in the history of
// every workflow of the namespace (fetched through the Temporal client).
func (e *env) scanSecrets(needles []needle, logFiles []string) secretsSummary {
	var s secretsSummary
	s.Needles = len(needles)
	type compiled struct {
		what   string
		forms  [][]byte
		canary bool
	}
	var cs []compiled
	for _, n := range needles {
		if n.value == "" {
			continue
		}
		c := compiled{what: n.what, canary: n.canary}
		for _, f := range forms(n.value) {
			c.forms = append(c.forms, []byte(f))
		}
		cs = append(cs, c)
	}
	scan := func(where string, data []byte, history bool) {
		for _, c := range cs {
			for _, f := range c.forms {
				if !bytes.Contains(data, f) {
					continue
				}
				switch {
				case c.canary && history:
					s.CanaryFound++
				case !c.canary:
					s.Findings = append(s.Findings, fmt.Sprintf("%s in %s", c.what, where))
				}
				break
			}
		}
	}
	for _, f := range logFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			s.Findings = append(s.Findings, fmt.Sprintf("could not read log %s: %v", f, err))
			continue
		}
		s.LogFiles++
		s.LogBytes += len(data)
		scan("log "+filepath.Base(f), data, false)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var token []byte
	for {
		resp, err := e.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", PageSize: 500, NextPageToken: token})
		if err != nil {
			s.Findings = append(s.Findings, fmt.Sprintf("could not list workflows: %v", err))
			return s
		}
		for _, ex := range resp.Executions {
			s.Workflows++
			wid, rid := ex.Execution.WorkflowId, ex.Execution.RunId
			// Memo and search attributes are stored beside the history: scan them too.
			var buf bytes.Buffer
			for _, p := range []proto.Message{ex.Memo, ex.SearchAttributes} {
				if p != nil {
					b, _ := proto.Marshal(p)
					buf.Write(b)
				}
			}
			it := e.temporal.GetWorkflowHistory(ctx, wid, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					s.Findings = append(s.Findings, fmt.Sprintf("could not read the history of %s: %v", wid, err))
					break
				}
				s.Events++
				b, _ := proto.Marshal(ev)
				buf.Write(b)
			}
			scan("the history of workflow "+wid, buf.Bytes(), true)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return s
		}
	}
}
