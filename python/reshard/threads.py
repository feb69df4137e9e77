# threads.py - run one function per rank on threads (the in-process transports need each rank's executor on
# its own thread), joining all of them and re-raising the first failure with its rank.
import threading


class RankError(RuntimeError):
    """A rank's function raised: .rank, .error (the exception) and .errors ({rank: exception} for every rank
    that failed)."""

    def __init__(self, errors):
        self.errors = errors
        # the cause rather than its echoes: a rank whose error is not "another rank failed / aborted"
        causes = [r for r, e in errors.items() if getattr(e, "name", "") not in ("rsRemoteError", "rsAborted")]
        self.rank = min(causes or errors)
        self.error = errors[self.rank]
        super().__init__("rank %d: %s: %s%s" % (self.rank, type(self.error).__name__, self.error,
                                                " (and %d other ranks failed)" % (len(errors) - 1) if len(errors) > 1
                                                else ""))


def run_threads(nranks, fn, *args):
    """Call fn(rank, *args) for rank 0..nranks-1, each on its own thread; return the results in rank order.
    Raises RankError when any rank raised (after every thread has finished)."""
    results, errors = [None] * nranks, {}

    def main(r):
        try:
            results[r] = fn(r, *args)
        except BaseException as e:  # reported below, with its rank
            errors[r] = e

    threads = [threading.Thread(target=main, args=(r,), name="reshard-rank-%d" % r) for r in range(nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        e = RankError(errors)
        raise e from e.error
    return results
