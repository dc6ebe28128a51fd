# syntax=docker/dockerfile:1
#
# kmirror container image: a static Go binary on distroless, run as non-root.
#
#   docker build -t kmirror:dev \
#     --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run --rm kmirror:dev version
#
# deploy/kubernetes/ shows how to run it.

# The build runs on the builder's platform and cross-compiles for the target.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# Only what the binary is built from: no .git, test caches or Kafka jars.
COPY cmd ./cmd
COPY internal ./internal
COPY mirrorclient ./mirrorclient
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/kmirror/kmirror/internal/version.Version=${VERSION} -X github.com/kmirror/kmirror/internal/version.Commit=${COMMIT}" \
      -o /out/kmirror ./cmd/kmirror

# distroless/static has CA certificates and tzdata, no shell; nonroot is UID 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kmirror /usr/local/bin/kmirror
USER 65532:65532
# 8083: REST API (--rest-addr), 9464: Prometheus metrics (--metrics-addr).
EXPOSE 8083 9464
ENTRYPOINT ["/usr/local/bin/kmirror"]
CMD ["help"]
