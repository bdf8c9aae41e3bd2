// placeholder: scripts/bench drives this
