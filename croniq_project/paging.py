from django.core.paginator import Paginator
from django.utils.functional import cached_property

# Counting a million executions on every admin page costs more than the page.
COUNT_LIMIT = 10_000


class BoundedCountPaginator(Paginator):
    """Counts at most COUNT_LIMIT rows; past that the last page is approximate."""

    @cached_property
    def count(self):
        return self.object_list[: COUNT_LIMIT + 1].count()
