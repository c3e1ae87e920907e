// Package e2eframework is empty: see go.mod.
package e2eframework
