"""The native backend changes the host's kernel: our modules' parameters are
set for the task and put back afterwards, and only modules the task loaded
are unloaded. The kernel side (sysfs, modprobe) is replaced by a dict here;
tests/integration/test_ccmodules.py covers the real modules in the guest."""

import pytest

from tortoiselab.guest import modules
from tortoiselab.spec.requests import PageLoadRequest


class FakeKernel:
    def __init__(self, loaded: dict[str, dict[str, str]]):
        self.params = loaded  # module -> its parameters (loaded modules only)
        self.argv: list[list[str]] = []

    def run(self, argv, check=True):
        self.argv.append(argv)
        alg = argv[1][len("tcp_"):]
        if argv[0] == "modprobe":
            self.params[alg] = {"beta": "0.500"}
        elif argv[0] == "rmmod":
            self.params.pop(alg)


@pytest.fixture
def kernel(monkeypatch):
    k = FakeKernel({"cubic_plus": {"beta": "0.700", "n": "6"}})
    monkeypatch.setattr(modules, "available_algorithms", lambda: ["reno", "cubic", *k.params])
    monkeypatch.setattr(modules, "module_params_now", lambda alg: dict(k.params.get(alg, {})))

    def set_params(ex, alg, ps):
        k.params[alg].update(ps)
        return dict(k.params[alg])

    monkeypatch.setattr(modules, "set_module_params", set_params)
    return k


def test_parameters_are_restored_and_only_our_load_is_undone(kernel):
    req = PageLoadRequest(path={}, module_params={"cubic_plus": {"beta": "0.900"}},
                          loads=[{"label": "a", "server": {"cc": "reno_beta"}}, {"label": "b", "server": {"cc": "cubic"}}])
    needed = modules.requested_algorithms(req)
    assert needed == {"cubic_plus", "reno_beta", "cubic"}
    with modules.host_modules(kernel, needed, req.module_params) as now:
        assert now == {"cubic_plus": {"beta": "0.900", "n": "6"}, "reno_beta": {"beta": "0.500"}}
    assert kernel.params == {"cubic_plus": {"beta": "0.700", "n": "6"}}
    assert kernel.argv == [["modprobe", "tcp_reno_beta"], ["rmmod", "tcp_reno_beta"]]


def test_restored_even_when_the_task_fails(kernel):
    with pytest.raises(RuntimeError):
        with modules.host_modules(kernel, {"cubic_plus"}, {"cubic_plus": {"n": "2"}}):
            raise RuntimeError("task failed")
    assert kernel.params["cubic_plus"] == {"beta": "0.700", "n": "6"}


def test_parameters_a_task_changed_itself_are_restored_too(kernel):
    """loss_response sets each arm's parameters during the task, not through
    the request's module_params: they are put back as well."""
    with modules.host_modules(kernel, {"cubic_plus"}, {}) as now:
        assert now == {"cubic_plus": {"beta": "0.700", "n": "6"}}
        modules.set_module_params(kernel, "cubic_plus", {"n": "2", "beta": "0.800"})
    assert kernel.params["cubic_plus"] == {"beta": "0.700", "n": "6"}
