"""prometheus-adapter's configuration, read as it is: its rules resolved into what would be served.

``config`` parses the file (``parse_config``); ``gotemplate`` is the Go-template subset its queries use;
``resources`` the group-resource resolution and which labels name which resource; ``naming`` series -> metric
names; ``registry`` discovery from listed series (pure); ``metrics_query`` the PromQL for one request, from
escaped values only; ``discovery`` the ``/api/v1/series`` listing and the re-list cadence. The serving side
(``adapter/provider/promadapter.py``, ``adapter/provider/dispatch.py``) answers requests with them.
"""
