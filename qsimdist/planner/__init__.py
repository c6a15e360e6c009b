"""Planning: path (cotengra), lifetime mode ordering, and the versioned Plan."""
