"""Planning: the logical plan, per-variable aggregates, physical choices and the report.

* :mod:`faq.plan.logical`: variable orders, the cost model, InsideOut steps;
* :mod:`faq.plan.aggregates`: per-variable ⊕ operators (general FAQ);
* :mod:`faq.plan.physical`: where and how each step runs (driver, tasks or
  Spark; Generic Join or binary joins) and the binding orders;
* :mod:`faq.plan.report`: the text of ``explain()``.
"""
