"""names() and by_name() over a table of presets (shared by dcp.models and dcp.gpus)."""

from typing import Callable, Dict, List, Tuple, TypeVar

T = TypeVar("T")


def lookup(kind: str, table: Dict[str, Callable[[], T]]) -> Tuple[Callable[[], List[str]], Callable[[str], T]]:
    """names() and by_name(name) for `table`; by_name raises ValueError listing the known names."""

    def names() -> List[str]:
        return list(table)

    def by_name(name: str) -> T:
        factory = table.get(name) if isinstance(name, str) else None
        if factory is None:
            raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(table)}")
        return factory()

    names.__doc__ = f"The {kind} preset names by_name knows, as the dcp-plan tool spells them."
    by_name.__doc__ = (f"The {kind} preset called `name`; ValueError listing the known names "
                       f"otherwise.")
    return names, by_name
