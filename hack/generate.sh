#!/usr/bin/env bash
# `make generate`: what controller-gen makes of kobe's Kubernetes resources (resources/...):
# the deep copies of their Go types (resources/v1alpha1/zz_generated.deepcopy.go) and their
# CustomResourceDefinitions (deploy/crds/). The test TestGeneratedFilesMatchTheTypes runs this
# script into a temporary folder and fails when the committed files differ.
#
# Usage: hack/generate.sh [<crd dir> [<deepcopy dir>]]   (defaults: deploy/crds, beside the types)
#   CONTROLLER_GEN=<binary> uses that controller-gen instead of building it
#   (hack/build-controller-gen.sh).
#
# allowDangerousTypes: spec.scaling.failureBackoff.multiplier and a role's
# rateLimit.requestsPerSecond are numbers with a fraction in upstream's and kobe's manifests
# (float64); controller-gen refuses floats unless told.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

crds=${1:-deploy/crds}
cg=${CONTROLLER_GEN:-}
if [[ -z $cg ]]; then cg=$(hack/build-controller-gen.sh path); fi

if [[ -n ${2:-} ]]; then
  "$cg" object paths=./resources/v1alpha1 output:object:dir="$2"
else
  "$cg" object paths=./resources/...
fi
"$cg" crd:allowDangerousTypes=true paths=./resources/... output:crd:artifacts:config="$crds"
