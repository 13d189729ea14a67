# Sourced by the provide scripts that build binaries from a wrapper Go module (this folder's
# provide.sh, tests/bench/flux/provide.sh): what a module pins, how one binary is built, and
# the lock that has two runs at once build it only once. The sourcing script sets `provider`,
# the name its log lines begin with, and `build_note`, what a first build costs.

log() { printf '%s: %s\n' "$provider" "$*" >&2; }

module_version() { # module_version GO_MOD_DIR MODULE
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$1/go.mod"
}

module_dir() { # module_dir GO_MOD_DIR MODULE: where the Go module cache holds MODULE's source
  (cd "$1" && GOFLAGS=-mod=mod GOTOOLCHAIN=local go list -m -f '{{.Dir}}' "$2")
}

# build DIR OUT PACKAGE [LDFLAGS]: go build PACKAGE from the wrapper module in DIR into OUT.
build() {
  local dir=$1 out=$2 package=$3 ldflags=${4:-}
  log "building $(basename "$out") from $package (first run only; $build_note)"
  local started=$SECONDS
  # Called as `[ -x OUT ] || build …`, where errexit does not hold: a failure exits here.
  if ! (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w $ldflags" -o "$out.partial" "$package"); then
    log "building $(basename "$out") failed"
    exit 1
  fi
  mv -f "$out.partial" "$out"
  log "built $(basename "$out") in $((SECONDS - started)) s"
}

lock_cache() { # lock_cache ROOT: holds ROOT's lock on descriptor 9 until it is closed
  mkdir -p "$1"
  exec 9>"$1/.lock"
  flock 9
}
