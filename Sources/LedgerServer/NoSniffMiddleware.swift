import HTTPTypes
import Hummingbird

/// Marks every answer `X-Content-Type-Options: nosniff`, so that no browser reads a JSON or
/// text body (which may echo a subject, a search or event data) as HTML or script: the routes'
/// answers, redirects, and the errors Hummingbird throws, the `404` of an unknown route among
/// them.
struct NoSniffMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        } catch {
            context.logger.error("\(error)")
            response = Reply.internalError.response
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        return response
    }
}
