# The optional Spark job of docker/compose.yaml (profile `spark`): the TritonMQ image plus
# pyspark and pyarrow from the same wheelhouse, running clients/examples/spark_ingest.py.
# Built by `scripts/image --spark` (after the main image, which it starts from).
ARG BASE=tritonmq:dev
FROM ${BASE} AS venv
USER root
COPY wheels/ /tmp/wheels/
RUN /opt/tritonmq/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels \
        --disable-pip-version-check 'tritonmq[spark]'

FROM ${BASE}
USER root
COPY --from=venv /opt/tritonmq /opt/tritonmq
COPY spark_ingest.py /opt/tritonmq/examples/spark_ingest.py
RUN install -d -o tritonmq -g tritonmq /var/lib/tritonmq/ingest
USER tritonmq
ENV PYSPARK_PYTHON=/opt/tritonmq/bin/python SPARK_LOCAL_IP=127.0.0.1
ENTRYPOINT []
