# drax: the kube-scheduler extender. `docker build -t drax:0.1.0 .`
# `docker run -p 8888:8888 drax:0.1.0` serves the bundled sample cluster;
# in a pod (manifests/deployment.yaml) it watches the cluster instead.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install . && rm -rf /src

WORKDIR /
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["drax"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8888"]
