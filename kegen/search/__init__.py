"""The kernel search: graph store, selection policies, operators, fitness, termination, driver.

from kegen.search import SearchConfig, run_search
result = run_search(SearchConfig(problem="kegen/examples/softmax/problem.py", ...))
"""

from kegen.search.config import SearchConfig
from kegen.search.loop import SearchResult, run_search

__all__ = ["SearchConfig", "SearchResult", "run_search"]
