# One image holds both binaries: /manager (the operator, the default) and
# /example-tools (the sample workload). Build with `make docker-build`.
FROM golang:1.26 AS build
WORKDIR /src
# Module downloads are cached in their own layer, keyed on the go.mod files.
COPY go.mod go.sum ./
COPY toolkit/go.mod toolkit/go.sum toolkit/
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/manager"]
