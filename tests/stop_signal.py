"""A stop signal for runtime tests: reads "not set" `checks` times, then "set", like a Stop pressed
while the model runs. `asked` counts the reads, so a test sees where the call looked."""


class StopAfter:
    def __init__(self, checks: int):
        self.left, self.asked = checks, 0

    def is_set(self) -> bool:
        self.asked += 1
        return self.asked > self.left
