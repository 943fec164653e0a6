# One image holds every binary: /manager (the operator, the default
# entrypoint), /gateway (the MCP gateway, run with command: ["/gateway"]) and
# /example-tools (the sample workload, run with command: ["/example-tools"]). Build it with `make docker-build IMG=...`, or
# for several platforms with `make docker-buildx`.
#
# The build stage runs on the builder's own platform and cross-compiles, so a
# multi-platform build needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Module downloads are cached in their own layer, keyed on the go.mod files.
COPY go.mod go.sum ./
COPY toolkit/go.mod toolkit/go.sum toolkit/
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
ENV CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH
RUN go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager && \
    go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway && \
    go build -trimpath -ldflags="-s -w" -o /out/example-tools ./cmd/example-tools && \
    go build -trimpath -ldflags="-s -w" -o /out/kubectl-toolplane ./cmd/kubectl-toolplane

# distroless/static has no shell or package manager; :nonroot runs as UID and
# GID 65532, which the manifests' runAsNonRoot check needs numerically.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/manager"]
