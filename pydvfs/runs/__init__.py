"""What this board measured: the per-board store of online runs (:mod:`.store`) and the
board-learned policy refit from it (:mod:`.learned`). See docs/store.md."""
