package nacos

// nacos-sdk-go v2.3.2 requires google.golang.org/genproto at a version from
// before googleapis/api and googleapis/rpc became modules of their own. In
// a build that also has those modules (grpc-go, etcd's client, any recent
// Google API), the old module and the new ones both provide packages such
// as googleapis/api/annotations, and the build fails with "ambiguous
// import". This import makes the module require a genproto from after the
// split (go.mod; go mod tidy keeps a requirement only for a module that
// provides an imported package), so every build that uses this adapter
// selects it and the ambiguity cannot arise. The package is a few type
// aliases.
import _ "google.golang.org/genproto/protobuf/field_mask"
