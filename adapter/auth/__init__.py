"""Aggregated-API-server security: TLS serving, front-proxy/x509/token authentication, delegated authorization."""
