"""Linear: the GraphQL client, its documents, agent activities in a session, and the
Linear surface's side of the surface activities."""
