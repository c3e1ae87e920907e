# Shell functions shared by the tool build scripts (hack/build-*.sh source this file).

log() { printf '==> %s\n' "$*" >&2; }
die() { printf '\nERROR: %s\n\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1fs", e - s }'; }

# The kubernetes binaries report their version from these variables; without them
# `kube-apiserver --version` says v0.0.0, and clients (kubectl, controller-runtime) that
# negotiate on the server version misbehave.
kube_ldflags() { # <version>
  local v=$1 minor flags="-s -w" pkg
  minor=$(cut -d. -f2 <<<"${v#v}")
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  printf '%s' "$flags"
}

# Fails loudly when a script's version and a wrapper module's go.mod disagree, which would
# otherwise build one version into a folder named after another.
check_pin() { # <module dir> <module path> <version> <sync command>
  local dir=$1 mod=$2 want=$3 sync=$4 have
  have=$(cd "$dir" && go mod edit -json | awk -v m="\"$mod\"" '$1=="\"Path\":" && $2==m"," && !found {getline; gsub(/[",]/,"",$2); print $2; found=1}') ||
    die "cannot read $dir/go.mod"
  [[ $have == "$want" ]] || die "$dir/go.mod requires $mod ${have:-<none>}, but the build script says $want.
       Run: $sync"
}

missing() { # <dir> <binary>...: prints the binaries of <dir> that do not exist yet
  local dir=$1; shift
  local b
  for b in "$@"; do [[ -x $dir/$b ]] || printf '%s ' "$b"; done
}
