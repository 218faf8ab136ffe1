import Hummingbird
import Logging

/// Logs each request's method and path, never its query: a query holds what support staff
/// searched for (a transaction id, a subject), the moments they looked at, and now and then a
/// token someone put in `?token=`. A path still names the subject it reads.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let level: Logger.Level

    init(_ level: Logger.Level) {
        self.level = level
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        context.logger.log(level: level, "Request", metadata: [
            "hb.request.path": .string(request.uri.path),
            "hb.request.method": .string(request.method.rawValue),
        ])
        return try await next(request, context)
    }
}
