# The gitopsd image: `docker build -t gitopsd .` (or `buildah bud -t gitopsd .`).
#
# Build arguments:
#   BASE           a Debian-based image with python3 (3.11 or later) on PATH; the build stage
#                  and the final image both use it, so the venv's interpreter is the same one.
#   KUBECTL_IMAGE  an image holding a static kubectl at /bin/kubectl (`kubectl kustomize`
#                  renders kustomizations).
#   HELM_IMAGE     an image holding a static helm at /bin/helm (`helm template` renders charts).
#                  By default the stage helm-from-source builds it in GO_IMAGE from helm's Go
#                  module, pinned by tests/controlplane/helm/go.mod and go.sum: the helm the
#                  tests run.
#   SOPS_IMAGE     an image holding a static sops at /bin/sops (it decrypts SOPS-encrypted
#                  files). By default the stage sops-from-source builds it in GO_IMAGE from
#                  sops's Go module, pinned by tests/controlplane/sops/go.mod and go.sum.
#   VERSION, REVISION  recorded in the OCI labels.
# The tags below are what the project tests against; release builds pin both images by
# digest (BASE=python:3.11-slim-bookworm@sha256:…), which only a registry can tell.
ARG BASE=python:3.11-slim-bookworm
ARG KUBECTL_IMAGE=registry.k8s.io/kubectl:v1.34.4
ARG GO_IMAGE=golang:1.26-bookworm
ARG HELM_IMAGE=helm-from-source
ARG SOPS_IMAGE=sops-from-source

FROM ${KUBECTL_IMAGE} AS kubectl

# Only built when HELM_IMAGE names it (the default): a build that is given a helm image
# skips this stage, and needs no Go.
FROM ${GO_IMAGE} AS helm-from-source
COPY tests/controlplane/helm/go.mod tests/controlplane/helm/go.sum tests/controlplane/helm/tools.go /helm/
RUN cd /helm \
    && version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v4" {print $3}' go.mod) \
    && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o /bin/helm \
        -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
        helm.sh/helm/v4/cmd/helm

FROM ${HELM_IMAGE} AS helm

# As helm-from-source: only built when SOPS_IMAGE names it.
FROM ${GO_IMAGE} AS sops-from-source
COPY tests/controlplane/sops/go.mod tests/controlplane/sops/go.sum tests/controlplane/sops/tools.go /sops/
RUN cd /sops \
    && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o /bin/sops \
        github.com/getsops/sops/v3/cmd/sops

FROM ${SOPS_IMAGE} AS sops

# The venv is built here and copied: pip, setuptools and anything a build needs stay behind.
FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/gitopsd
# The dependencies first, the locked set with its hashes: a change of the source reuses them.
COPY requirements/runtime.txt /src/requirements/
RUN /opt/gitopsd/bin/pip install --quiet --require-hashes --requirement /src/requirements/runtime.txt
COPY pyproject.toml README.md /src/
COPY gitopsd /src/gitopsd
RUN /opt/gitopsd/bin/pip install --quiet --no-deps /src \
    && /opt/gitopsd/bin/pip uninstall --quiet --yes setuptools wheel pip

FROM ${BASE}
# git and ssh fetch sources, gpg and ssh-keygen verify their signatures; apt runs only when
# the base lacks them (the tests' base has them, so their build needs no Debian mirror).
# The base's own pip goes too: nothing builds or installs at run time. ssh refuses to run
# for a uid without a passwd entry: 65532 gets one.
RUN set -eu; \
    missing=""; \
    command -v git >/dev/null || missing="$missing git"; \
    command -v ssh >/dev/null || missing="$missing openssh-client"; \
    command -v gpg >/dev/null || missing="$missing gpg"; \
    [ -s /etc/ssl/certs/ca-certificates.crt ] || missing="$missing ca-certificates"; \
    if [ -n "$missing" ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    if python3 -m pip --version >/dev/null 2>&1; then \
        python3 -m pip uninstall --quiet --yes pip setuptools wheel; \
    fi; \
    echo 'gitopsd:x:65532:65532:gitopsd:/tmp:/usr/sbin/nologin' >> /etc/passwd; \
    echo 'gitopsd:x:65532:' >> /etc/group; \
    install -d -o 65532 -g 65532 -m 0750 /var/cache/gitopsd; \
    install -d -m 0755 /etc/gitopsd
COPY --from=kubectl /bin/kubectl /usr/local/bin/kubectl
COPY --from=helm /bin/helm /usr/local/bin/helm
COPY --from=sops /bin/sops /usr/local/bin/sops
# HOME: git and kubectl want one, and the root filesystem may be read-only; /tmp and
# /var/cache/gitopsd (the cacheDir) are the volumes the Deployment mounts writable.
# MALLOC_ARENA_MAX: glibc gives each thread that allocates an arena of its own (up to 8 per
# core), and what one frees the others do not reuse; two arenas for the daemon's ~30
# threads. At 10,000 objects (2 cores) glibc's heaps held 36-38 MiB instead of 38-48, and
# the RSS once settled was 1-5 MiB lower; most of the rest is Python's own allocator.
# tests/harness/daemon.py starts the tests' and the bench's daemons with the same setting.
ENV PATH=/opt/gitopsd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    MALLOC_ARENA_MAX=2 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# Exec form: gitopsd is PID 1 and receives SIGTERM itself (it finishes the reconcile in flight).
ENTRYPOINT ["/opt/gitopsd/bin/gitopsd"]
CMD ["run", "--config", "/etc/gitopsd/gitopsd.yaml"]
# Last, what changes most: a new version or source rebuilds only these steps.
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gitopsd" \
      org.opencontainers.image.description="GitOps reconciliation daemon for Kubernetes: exact drift, safe pruning, drift metrics." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /opt/gitopsd /opt/gitopsd
