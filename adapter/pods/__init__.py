"""Who are the pods behind a selector or a Deployment."""
