module github.com/skillrun/skillrun/hack/clients/crirun

go 1.22

require (
	google.golang.org/grpc v1.60.1
	k8s.io/cri-api v0.26.15
)

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	golang.org/x/net v0.17.0 // indirect
	golang.org/x/sys v0.13.0 // indirect
	golang.org/x/text v0.13.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20231002182017-d307bd883b97 // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)
