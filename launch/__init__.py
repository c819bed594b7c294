"""Starting a build's ranks and watching them: in the launcher's own process (``single``) or
under ``horovodrun --gloo`` (:mod:`.job`), on this machine or over ssh on others
(:mod:`.hosts`), through horovodrun less its Gloo check (:mod:`.hvdrun`)."""
