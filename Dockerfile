# wharf: a static binary on a distroless, non-root base.
#   docker build -t wharf .
#   docker run --rm -p 9000:9000 wharf serve --listen 0.0.0.0:9000 --store s3:// --archive NAME=s3://BUCKET/KEY ...
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/wharf ./cmd/wharf

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/wharf /usr/local/bin/wharf
USER nonroot:nonroot
# 9000: S3 endpoint; 9090: admin (/healthz, /readyz, /metrics, /debug/pprof/)
EXPOSE 9000 9090
ENTRYPOINT ["/usr/local/bin/wharf"]
CMD ["help"]
