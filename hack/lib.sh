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

# One build of a script's tools at a time. `make tools` runs in the background of .ci/run while
# `make lint` compiles, and hack/test.sh calls the same scripts again before each part of the
# suite that needs them: the second caller waits here for the first, then finds its tools built
# (a warm check of files). The lock is held until the script exits.
hold_build_lock() { # <out> <script name>
  mkdir -p "$1"
  exec {BUILD_LOCK_FD}>"$1/.build-$2.lock"
  if ! flock -n "$BUILD_LOCK_FD"; then
    log "$2: another build of these tools is running; waiting for it"
    flock "$BUILD_LOCK_FD"
  fi
}

missing() { # <dir> <binary>...: prints the binaries of <dir> that do not exist yet
  local dir=$1; shift
  local b
  for b in "$@"; do [[ -x $dir/$b ]] || printf '%s ' "$b"; done
}

# The command line of a build-*-tools.sh script: `sync` runs <sync function> (it regenerates the
# script's wrapper module) and exits; `build`, the default, makes the output folder <out> ready
# (with a .gitignore, so that a cache inside the repository is never committed) and returns.
tools_command() { # <sync function> <module dir> <out> [build|sync]
  local sync=$1 moddir=$2 out=$3
  case ${4:-build} in
    sync) "$sync"; log "sync done; review and commit ${moddir#"$REPO_ROOT"/}/go.mod and go.sum"; exit 0 ;;
    build) ;;
    *) die "unknown command '$4' (usage: $0 [build|sync])" ;;
  esac
  mkdir -p "$out"
  [[ -f $out/.gitignore ]] || printf '*\n' >"$out/.gitignore"
}

# go build of <package> in <module dir> into the file <dest>, through a temporary folder of
# <out> renamed at the end: an interrupted build never leaves a half-written binary that a
# later run would take for a finished one. The remaining arguments go to go build.
go_build_to() { # <out> <dest> <module dir> <package> [go build flags...]
  local out=$1 dest=$2 moddir=$3 pkg=$4; shift 4
  local tmp; tmp=$(mktemp -d "$out/.build.XXXXXX")
  if ! (cd "$moddir" && go build "$@" -o "$tmp/${dest##*/}" "$pkg"); then
    rm -rf "$tmp"
    die "go build of $pkg failed (see the compiler output above)"
  fi
  mkdir -p "${dest%/*}"
  mv -f "$tmp/${dest##*/}" "$dest"
  rm -rf "$tmp"
}

# Adds (or replaces) lines of <out>/versions.env, atomically: the lines that match <pattern>
# (grep's basic regular expression) go, the lines read from stdin are added; <what> names them
# in the log.
record_versions() { # <out> <pattern> <what>  (the new lines on stdin)
  local env=$1/versions.env lock
  # make tools runs some scripts at once (hack/build-all-tools.sh): one read-modify-write at a time.
  exec {lock}>"$1/.versions.lock"
  flock "$lock"
  local tmp; tmp=$(mktemp "$1/.versions.env.XXXXXX")
  if [[ -f $env ]]; then grep -v "$2" "$env" >"$tmp" || true; fi
  cat >>"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$env"
  exec {lock}>&-
  log "manifest: $env ($3)"
}

# Regenerates a wrapper module's go.sum from its go.mod (rewritten by the caller): go mod tidy
# with the environment given (e.g. GONOSUMDB=…), or dies naming the folder.
tidy_module() { # <module dir> [VAR=value...]
  local moddir=$1; shift
  rm -f "$moddir/go.sum"
  (cd "$moddir" && env "$@" go mod tidy) || die "sync of $moddir failed"
}
