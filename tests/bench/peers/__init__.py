"""The peers `make bench PEERS=flux` measures gitopsd beside, in the same run: Flux's
source-controller and kustomize-controller (flux), on a fleet of tenants (fleet) and on one
source of the largest size (source), with their tables (report)."""
