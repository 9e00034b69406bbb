"""REST and WebSocket routes: thin adapters over the domain modules, one module per resource."""
