//! Prints the OpenAPI document the server serves at `/api/v1/openapi.json`.
fn main() {
    println!(
        "{}",
        tickscope_server::api::openapi()
            .to_pretty_json()
            .expect("the document serialises")
    );
}
