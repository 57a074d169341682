mod hot_text_link;

fn main() {
    hot_text_link::link("cordon-helper");
}
