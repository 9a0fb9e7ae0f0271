"""A prompt source that hands out fixed batches in order, for the 2-process workers of tests/dist/ (their checkpoints
save and restore its position)."""


class ScriptedSource:
    def __init__(self, batches):
        self.batches, self.i = batches, 0

    def take(self, k):
        assert k == len(self.batches[self.i])
        self.i += 1
        return self.batches[self.i - 1]

    def state_dict(self):
        return {"i": self.i}

    def load_state_dict(self, s):
        self.i = s["i"]
