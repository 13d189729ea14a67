"""gitopsd: declarative GitOps reconciliation for Kubernetes."""
