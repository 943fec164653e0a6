# One image holds every binary: /manager (the operator, the default
# entrypoint), /gateway (the MCP gateway, run with command: ["/gateway"]) and
# /example-tools (the sample workload, run with command: ["/example-tools"]). Build it with `make docker-build IMG=...`, or
# for several platforms with `make docker-buildx`.
#
# The build stage runs on the builder's own platform and cross-compiles, so a
# multi-platform build needs no emulation.
#
# Base images: the release workflow (.github/workflows/release.yaml) resolves
# GO_IMAGE and BASE_IMAGE to their digests and builds with them pinned
# (--build-arg GO_IMAGE=golang:1.26@sha256:…), so a release is reproducible
# and records exactly what it was built on. Pin a default here by appending
# @sha256:… to it once you have checked the digest (crane digest IMAGE).
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
# Module downloads are cached in their own layer, keyed on the go.mod files.
COPY go.mod go.sum ./
COPY toolkit/go.mod toolkit/go.sum toolkit/
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ENV CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH
RUN go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager && \
    go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/gateway ./cmd/gateway && \
    go build -trimpath -ldflags="-s -w" -o /out/example-tools ./cmd/example-tools && \
    go build -trimpath -ldflags="-s -w" -o /out/kubectl-toolplane ./cmd/kubectl-toolplane

# distroless/static has no shell or package manager; :nonroot runs as UID and
# GID 65532, which the manifests' runAsNonRoot check needs numerically.
FROM ${BASE_IMAGE}
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/manager"]
