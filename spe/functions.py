"""Python scalar functions (federation.udf) in Spark: Arrow UDFs (pyspark's `arrow_udf`),
run vectorized on Arrow batches in Spark's Python workers, callable by name in the SQL
expressions the translation writes (`F.expr`)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence

from federation.conventions import SPARK_TYPES


def register_functions(spark, functions: Sequence) -> None:
    """Register each function (`name`, `returns` as a plan type, `apply(*arrays, zone)`)
    on the session; its timestamps are handed over in the session's time zone (UTC)."""
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    zone = spark.conf.get("spark.sql.session.timeZone")
    for f in functions:
        with warnings.catch_warnings():  # "prefer type hints": the arity is the call's
            warnings.simplefilter("ignore", UserWarning)
            u = arrow_udf(functools.partial(f.apply, zone=zone), SPARK_TYPES[f.returns],
                          ArrowUDFType.SCALAR)
        spark.udf.register(f.name, u)
