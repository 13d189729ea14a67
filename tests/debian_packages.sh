# Sourced by the provide scripts of the tests' Debian packages (Prometheus, Alertmanager,
# the browser, the shells, the image tools), each of which defines log().
#
# debian_packages INSTEAD PACKAGE...: as root, installs Debian's PACKAGEs (once per
# machine: the scripts look for the programs first); otherwise stops, saying which packages
# to install, or which variables to set INSTEAD ("" when none would do).
debian_packages() {
  local instead=$1
  shift
  if [ "$(id -u)" -ne 0 ]; then
    log "not found; install Debian's packages $*${instead:+, or set $instead}"
    exit 1
  fi
  log "installing Debian's packages $* (first run only)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "$@" >&2
}
