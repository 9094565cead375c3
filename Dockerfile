# drax's image: `docker build -t drax:0.1.0 .` (README "Deploying"); the chart
# and manifests/deployment.yaml run drax:0.1.0. `docker run -p 8888:8888
# drax:0.1.0` serves the bundled sample cluster; in a pod it watches the
# cluster instead.
#
# The build stage installs drax and its dependencies into a venv that has no
# pip; the final stage is the same base with that venv and without pip,
# setuptools or wheel. tests/server/test_server_image.py runs the build
# stage's RUN line on a fresh venv and then the ENTRYPOINT and CMD.
FROM python:3.11.7-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY app ./app
RUN python -m venv --without-pip /opt/drax && python -m pip --python /opt/drax/bin/python install .

FROM python:3.11.7-slim-bookworm
RUN python -m pip uninstall --yes --quiet pip setuptools wheel
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/drax/bin:$PATH
COPY --from=build /opt/drax /opt/drax
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["drax"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8888"]
