// Package testsuite gives kobe's integration tests real parts: an embedded Temporal server,
// kobe stores on SQLite and PostgreSQL, and (in later issues) host clusters and backend
// conformance. Everything it starts is torn down with t.Cleanup.
package testsuite
