"""Charts a hostile tenant commits, shared by the tests and the tenants benchmark."""

from __future__ import annotations

RENDER_BOMB = """{{- $s := "aaaaaaaaaaaaaaaa" }}
{{- range $i := until 14 }}{{ $s = repeat 4 $s }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: bomb
data:
  size: {{ len $s | quote }}
"""
"""A 16-byte string made four times longer fourteen times: 4 GiB, from 300 bytes."""
